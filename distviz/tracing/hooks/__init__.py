"""What is put into the traced program (torch side): the patches, the dispatch of each backward, the local-backward hook, call counting, naming."""
