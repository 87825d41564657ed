"""The hardware: the GPU catalogue, clusters and their text and dict forms, GPU pools."""
