"""A graph convolutional network in the style of Kipf's pygcn (``pygcn/layers.py``,
``pygcn/models.py``, ``pygcn/utils.py``, ``pygcn/train.py``): a ``GraphConvolution`` layer with
``FloatTensor`` parameters and a ``reset_parameters`` uniform init, ``torch.spmm(adj, support)``,
a row-normalised sparse adjacency turned into a torch sparse tensor by
``sparse_mx_to_torch_sparse_tensor``, ``output[idx_train]`` integer-tensor indexing, NLL loss on
``log_softmax`` and Adam with weight decay.

The data is a small synthetic citation graph instead of Cora, built with numpy (scipy.sparse
is replaced by numpy COO arrays: ``row``, ``col``, ``data``).

Plain PyTorch: tests/test_issue34_model_files.py runs this text unchanged with PyTorch and
with another library bound to ``torch``.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter
from torch.nn.modules.module import Module


class GraphConvolution(Module):
    """
    Simple GCN layer, similar to https://arxiv.org/abs/1609.02907
    """

    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        else:
            return output

    def __repr__(self):
        return self.__class__.__name__ + ' (' \
               + str(self.in_features) + ' -> ' \
               + str(self.out_features) + ')'


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()

        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


# ---- utils.py, with numpy COO arrays in place of scipy.sparse -----------------------------------
def encode_onehot(labels):
    classes = sorted(set(labels))
    classes_dict = {c: np.identity(len(classes))[i, :] for i, c in
                    enumerate(classes)}
    labels_onehot = np.array(list(map(classes_dict.get, labels)),
                             dtype=np.int32)
    return labels_onehot


def normalize(row, col, data, n):
    """Row-normalize a COO matrix (pygcn's ``normalize``: D^-1 A)."""
    rowsum = np.bincount(row, weights=data, minlength=n)
    r_inv = np.power(rowsum, -1.0)
    r_inv[np.isinf(r_inv)] = 0.
    return data * r_inv[row]


def sparse_mx_to_torch_sparse_tensor(row, col, data, shape):
    """Convert a COO matrix to a torch sparse tensor."""
    indices = torch.from_numpy(
        np.vstack((row, col)).astype(np.int64))
    values = torch.from_numpy(data.astype(np.float32))
    shape = torch.Size(shape)
    return torch.sparse_coo_tensor(indices, values, shape)


def normalize_adj_dense(adj):
    """The symmetric renormalisation of the GCN paper, D^-1/2 (A + I) D^-1/2, on a dense
    adjacency tensor (as GCN ports without scipy write it), returned sparse."""
    adj = adj + torch.eye(adj.size(0), dtype=adj.dtype)
    d_inv_sqrt = adj.sum(1).pow(-0.5)
    d_mat_inv_sqrt = torch.diag(d_inv_sqrt)
    return torch.mm(torch.mm(d_mat_inv_sqrt, adj), d_mat_inv_sqrt).to_sparse()


def load_data(n_nodes=40, n_feat=12, n_class=3, seed=0):
    """A synthetic graph: nodes of a class share neighbours and features more often."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, n_class, n_nodes)
    features = (rng.rand(n_nodes, n_feat) < 0.2 + 0.4 * (np.arange(n_feat)[None, :] % n_class == labels[:, None]))
    features = features.astype(np.float32)
    features = features / np.maximum(features.sum(1, keepdims=True), 1)

    # build symmetric adjacency matrix with self-loops
    src, dst = np.nonzero(rng.rand(n_nodes, n_nodes) < np.where(labels[:, None] == labels[None, :], 0.15, 0.03))
    keep = src < dst
    row = np.concatenate([src[keep], dst[keep], np.arange(n_nodes)])
    col = np.concatenate([dst[keep], src[keep], np.arange(n_nodes)])
    data = normalize(row, col, np.ones(len(row)), n_nodes)

    idx_train = range(n_nodes // 2)
    idx_val = range(n_nodes // 2, 3 * n_nodes // 4)
    idx_test = range(3 * n_nodes // 4, n_nodes)

    features = torch.FloatTensor(features)
    labels = torch.LongTensor(np.where(encode_onehot(labels))[1])
    adj = sparse_mx_to_torch_sparse_tensor(row, col, data, (n_nodes, n_nodes))

    idx_train = torch.LongTensor(idx_train)
    idx_val = torch.LongTensor(idx_val)
    idx_test = torch.LongTensor(idx_test)
    return adj, features, labels, idx_train, idx_val, idx_test


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


# ---- train.py -------------------------------------------------------------------------------------
def make_model(nfeat, nclass, hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4):
    model = GCN(nfeat=nfeat,
                nhid=hidden,
                nclass=nclass,
                dropout=dropout)
    optimizer = optim.Adam(model.parameters(),
                           lr=lr, weight_decay=weight_decay)
    return model, optimizer


def make_train_step(model, optimizer, adj, labels, idx_train, idx_val):
    """The body of train.py's ``train(epoch)`` (without the timing and the prints): returns the
    losses and accuracies it would print."""
    def train(features):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()

        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        return loss_train, acc_train, loss_val, acc_val
    return train


def test(model, features, adj, labels, idx_test):
    model.eval()
    output = model(features, adj)
    loss_test = F.nll_loss(output[idx_test], labels[idx_test])
    acc_test = accuracy(output[idx_test], labels[idx_test])
    return loss_test.item(), acc_test.item()
