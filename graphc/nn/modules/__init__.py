"""``torch.nn.modules``: the module paths public code imports from
(``from torch.nn.modules.module import Module``); the classes are graphc.nn's."""
