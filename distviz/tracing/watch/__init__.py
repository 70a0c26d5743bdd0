"""The watch: every backward not recorded in full, with a deadline, recorded late when it passes."""
