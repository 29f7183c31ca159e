"""Same as train_cnn_digits.py (kept under this name for the training issue's references).

Run: python examples/train_cnn.py [--epochs 8]
"""
import argparse
import runpy
from pathlib import Path

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    epochs = parser.parse_args().epochs
    runpy.run_path(str(Path(__file__).with_name("train_cnn_digits.py")))["main"](epochs)
