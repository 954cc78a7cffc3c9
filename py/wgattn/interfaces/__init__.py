"""One module per registered interface: how to lay its inputs out for a kernel (a `Plan`) and how
its knobs map onto `wgattn.reference`."""
