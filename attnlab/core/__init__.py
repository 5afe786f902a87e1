"""Foundations: errors, activation specs, sequences, files, calls, argument checks,
devices and precision, batches. Everything else in attnlab builds on these."""
