"""A DCGAN in the style of pytorch/examples' ``dcgan/main.py``, made small: a generator of
transposed convolutions (BatchNorm, ReLU, Tanh at the end) mapping ``nz``-dim noise to 16x16
images, a discriminator of strided convolutions (BatchNorm, LeakyReLU(0.2), a Sigmoid score),
``weights_init`` applied with ``.apply``, BCELoss, two Adams with betas (0.5, 0.999), and the
example's training step: the discriminator on a real batch, then on the generator's fakes
(detached), its optimizer stepped, then the generator scored by the updated discriminator.

Plain PyTorch: tests/test_generative_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``, ``nn`` and ``optim``.
"""
import torch
import torch.nn as nn
import torch.optim as optim

nc = 3     # number of image channels
nz = 8     # size of the latent vector
ngf = 8    # generator feature maps
ndf = 8    # discriminator feature maps
lr = 0.0002
beta1 = 0.5

real_label = 1.
fake_label = 0.


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu=1):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 4 x 4
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            # state size. (ngf) x 8 x 8
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        output = self.main(input)
        return output


class Discriminator(nn.Module):
    def __init__(self, ngpu=1):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def make_models():
    netG = Generator()
    netG.apply(weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    return netG, netD


def make_optimizers(netG, netD):
    # setup optimizer
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(beta1, 0.999))
    return optimizerD, optimizerG


def make_train_step(netG, netD, optimizerD, optimizerG):
    """The body of the example's ``for i, data in enumerate(dataloader)`` loop; the noise is an
    argument (the example draws it with torch.randn inside the loop)."""
    criterion = nn.BCELoss()

    def train_step(real_cpu, noise):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=real_cpu.device)

        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean()

        # train with fake
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean()
        optimizerG.step()
        return errD, errG, D_x, D_G_z1, D_G_z2

    return train_step
