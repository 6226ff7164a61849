"""The metadata filter language (``language``: ``parse_filter``, the ``Filter`` tree) and its evaluation over a
segment's rows (``rows``).

>>> parse_filter("year >= 2020 and lang == 'en'").fields()  # doctest: +SKIP
"""

from whitevec.index.filters.language import Filter, parse_filter

__all__ = ["Filter", "parse_filter"]
