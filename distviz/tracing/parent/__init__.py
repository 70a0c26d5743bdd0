"""The parent's process of `distviz trace` (torch-free): the launch, the command, the summary."""
