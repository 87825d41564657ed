"""The embedded default data, installed as the package ``explorer_data``.

Files here are read with :func:`explorer.datafiles.data_path`; each table
says where its numbers come from.
"""
