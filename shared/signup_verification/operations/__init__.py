"""Operations: the scheduled runs (the dispatcher, the reconciler's duties), the signals, the status
table and the inspect timeline."""
