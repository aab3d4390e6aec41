"""The knowledge-hub sink: ``client`` (one POST and its verdict), ``spool`` (diaries
waiting on disk) and ``sink`` (the delivery runner that connects them)."""
