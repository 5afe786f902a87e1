"""The parts of `generate` beyond the decoding loop: its arguments (`settings`), the prompts
it starts from (`prompts`) and the processors that turn each step's scores into the next
tokens (`processors`), in transformers' order and with its semantics."""
