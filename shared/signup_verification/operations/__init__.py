"""Operations: the reconciler's duties, the signals, the status table and the inspect timeline."""
