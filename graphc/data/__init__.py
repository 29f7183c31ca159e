"""``graphc.data``: TensorDataset, DataLoader (numpy batches) and bundled datasets."""
from . import datasets
from .loader import DataLoader, Dataset, TensorDataset

__all__ = ["DataLoader", "Dataset", "TensorDataset", "datasets"]
