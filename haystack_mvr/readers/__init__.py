"""
The readers' wing: what turns retrieved context into an answer.

``base_model`` locates the generative reader's base (standard library only), ``generative_model`` loads, merges and
runs it (torch and transformers, no haystack), ``shipped`` is the reader that ships inside this package and the
local folder it is built into, ``generative_reader`` the Haystack component that answers with it. Nothing is
imported here, so ``haystack-mvr train-reader`` checks its ``--model`` before torch loads.
"""
