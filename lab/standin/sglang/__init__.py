"""The gpulxc lab's stand-in `sglang` package (test infrastructure): see launch_server.py."""
