"""What a model is made of: config reading, architectures, tensors, precisions, weights, KV cache, shapes."""
