"""What is put into the traced program: the patches, the dispatch of each backward, the local-backward hook, call counting, naming.

Torch side; nothing is patched until the program imports torch.
"""
