"""Assembly: a task's spans in, one ``Ready`` pair per root task span out.

``inprocess`` decides when a task span's local root ends; ``grace`` decides a grace
period after a task span arrived, for spans that come over the network in any order.
Both keep open traces in one bounded ``table.TraceTable``; ``batch`` is what decoders
hand in."""
