"""GGUF files: the byte reader, headers, quant naming, llama.cpp hyper-parameters, shapes from headers."""
