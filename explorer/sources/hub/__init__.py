"""EDGE: the Hugging Face Hub client (huggingface_hub only)."""
