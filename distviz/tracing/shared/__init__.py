"""What the parts of `distviz trace` share: the journal, the in-flight table, the slots and the
backward statistics between the parent and the traced processes; and, inside each traced
process, its state (`process`), the side thread's RPC rounds (`fanout`), live output, stopping
the program, and leaf names, which the hooks, the recording and the watch all use."""
