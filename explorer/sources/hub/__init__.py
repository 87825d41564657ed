"""EDGE: the Hugging Face Hub client. Its modules, bottom to top:

- ``settings``: :class:`HubSettings` (endpoint, timeout, offline, token);
- ``records``: what the Hub says (``RepoListing``, ``SafetensorsParams``...), no I/O;
- ``errors``: huggingface_hub and httpx2 failures -> explorer's typed errors;
- ``http``: the one httpx2 client, headers, URLs, status checks;
- ``client``: a repo's listing and small JSON files;
- ``weights``: safetensors and GGUF headers, by ranged reads;
- ``many``: everything a plan needs about one repo, or many at once.

Import names from the module that defines them.
"""
