"""How a store keeps each vector: the encodings (``spec``: float32, fp16, SQ, PQ, 1-bit codes, rescoring; parsing,
bytes per vector), the sign step of 1-bit codes (``sign_codes``) and the vectors ``+rescore`` re-ranks with
(``rescore``)."""
