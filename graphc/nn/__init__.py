"""``graphc.nn``: modules with PyTorch's API, plus ``graphc.nn.functional``."""
from . import functional, init, parallel, utils
from . import functional_vision  # noqa: F401  (declares F.selu, F.prelu, F.instance_norm, ...)
from .activation import (ELU, GELU, Hardswish, Hardtanh, LeakyReLU, LogSoftmax, ReLU, ReLU6, Sigmoid, SiLU, Softmax,
                         Softplus, Tanh)
from .containers import Identity, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .layers import Conv1d, Conv2d, Dropout, Dropout2d, Embedding, Flatten, Linear, Unflatten
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d,
                      LPPool1d, LPPool2d, MaxPool1d, MaxPool2d, MaxUnpool1d, MaxUnpool2d)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .module import Module, Parameter
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,  # noqa: E501
                      ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
                      ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .resampling import PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm
from .activation_vision import (CELU, SELU, Hardsigmoid, LogSigmoid, Mish, PReLU, Softmax2d, Softmin, Softsign,
                                Tanhshrink, Threshold)
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .sync_batchnorm import SyncBatchNorm
from .attention import MultiheadAttention
from . import functional_attention  # noqa: F401,E402  (declares F.multi_head_attention_forward)
from . import loss_ctc  # noqa: F401,E402  (declares F.ctc_loss)
from .transformer import Transformer, TransformerEncoder, TransformerEncoderLayer
from .transformer_decoder import TransformerDecoder, TransformerDecoderLayer
from .conv import ConvTranspose1d, ConvTranspose2d, Fold, Unfold
from .modules_3d import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, AlphaDropout, AvgPool3d, Conv3d,  # noqa: E402
                         ConvTranspose3d, Dropout3d, FeatureAlphaDropout, MaxPool3d, MaxUnpool3d)
from .loss_more import (CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss,  # noqa: E402
                        MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss,
                        SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from .activation_more import (GLU, Bilinear, ChannelShuffle, CosineSimilarity, Hardshrink,  # noqa: E402
                              PairwiseDistance, RMSNorm, RReLU, Softshrink)

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d",
    "CrossEntropyLoss", "Dropout", "Dropout2d", "ELU", "Embedding", "Flatten", "GELU", "GroupNorm", "Hardswish",
    "Hardtanh", "Identity", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss", "MaxPool2d", "Module",
    "ModuleDict", "ModuleList", "Parameter", "ParameterDict", "ParameterList", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus",
    "SyncBatchNorm", "Tanh", "Unflatten", "functional", "init", "parallel", "utils",
    "ConvTranspose1d", "ConvTranspose2d", "Fold", "Unfold",  # transposed convolutions, sliding blocks
    # recurrent and attention
    "GRU", "GRUCell", "LSTM", "LSTMCell", "MultiheadAttention", "RNN", "RNNCell", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer",
    # padding
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    # resampling
    "PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d",
    # losses
    "BCELoss", "HuberLoss", "KLDivLoss", "L1Loss", "NLLLoss", "SmoothL1Loss",
    # vision normalization and activations
    "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "CELU", "SELU", "Hardsigmoid",
    "LogSigmoid", "Mish", "PReLU", "Softmax2d", "Softmin", "Softsign", "Tanhshrink", "Threshold",
    # pooling
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "LPPool1d", "LPPool2d", "MaxPool1d",
    "MaxUnpool1d", "MaxUnpool2d",
    # 3-D layers and alpha dropouts (graphc/nn/modules_3d.py)
    "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "AlphaDropout", "AvgPool3d", "Conv3d", "ConvTranspose3d", "Dropout3d",
    "FeatureAlphaDropout", "MaxPool3d", "MaxUnpool3d",
    # more losses and functional modules (graphc/nn/loss_more.py, activation_more.py)
    "CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss", "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss", "GLU", "Bilinear", "ChannelShuffle", "CosineSimilarity", "Hardshrink",
    "PairwiseDistance", "RMSNorm", "RReLU", "Softshrink",
]
