"""The parent side of a run (torch-free): ``run`` (start, drive and tear down the workers),
``training`` (the end of a training run), ``collate`` (a training run's messages -> a
``Recording``), ``torch_range`` (the torch releases distviz supports)."""
