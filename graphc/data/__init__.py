"""``graphc.data``: TensorDataset, DataLoader (numpy batches), DistributedSampler and bundled datasets."""
from . import datasets
from .loader import DataLoader, Dataset, TensorDataset
from .sampler import DistributedSampler

__all__ = ["DataLoader", "Dataset", "DistributedSampler", "TensorDataset", "datasets"]
