"""A recurrent image classifier: each 28x28 image is read row by row as a sequence of 28 steps
of 28 features by a two-layer LSTM (batch first), and a linear layer classifies the output of
the last time step. Trained with Adam and cross-entropy, as in the common PyTorch tutorials."""
import torch
import torch.nn as nn
import torch.optim as optim

sequence_length = 28
input_size = 28
hidden_size = 32
num_layers = 2
num_classes = 10
learning_rate = 0.01


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        # initial hidden and cell states
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(x.device)

        # out: (batch_size, seq_length, hidden_size)
        out, _ = self.lstm(x, (h0, c0))

        # the hidden state of the last time step
        out = self.fc(out[:, -1, :])
        return out


def make_model():
    return RNN(input_size, hidden_size, num_layers, num_classes)


def make_optimizer(model):
    return optim.Adam(model.parameters(), lr=learning_rate)


def make_train_step(model, optimizer):
    criterion = nn.CrossEntropyLoss()

    def train_step(images, labels):
        images = images.reshape(-1, sequence_length, input_size)
        outputs = model(images)
        loss = criterion(outputs, labels)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def accuracy(model, images, labels):
    model.eval()
    with torch.no_grad():
        outputs = model(images.reshape(-1, sequence_length, input_size))
        _, predicted = torch.max(outputs.data, 1)
        correct = (predicted == labels).sum().item()
    return correct / labels.size(0)
