"""``graphc.data``: datasets, samplers, ``default_collate`` and a DataLoader yielding ``gc.Tensor``
batches (``torch.utils.data``'s API), and bundled datasets."""
from . import datasets
from .collate import default_collate, default_convert
from .loader import DataLoader, Dataset, TensorDataset
from .sampler import DistributedSampler
from .samplers import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["BatchSampler", "DataLoader", "Dataset", "DistributedSampler", "RandomSampler", "Sampler",
           "SequentialSampler", "TensorDataset", "datasets", "default_collate", "default_convert"]
