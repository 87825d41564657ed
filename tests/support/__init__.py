"""Helpers the tests share: factories, the local Hub server, the llama.cpp harness."""
