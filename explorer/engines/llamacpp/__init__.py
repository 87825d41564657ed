"""llama.cpp's memory model: settings, the model as llama.cpp loads it, layers, KV, compute, fit."""
