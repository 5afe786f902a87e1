"""End-to-end demos run by `attnlab demo NAME`."""
