"""The applications: the ``graphc`` command line (``cli``: inspect, run, viz, convert), the
demo (the main job: ``make demo``), the benchmarks (``bench``) and what they share
(``describe``, ``arguments``). They use the library like any user; nothing in graphc imports
them back.
"""
