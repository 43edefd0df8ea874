"""``python -m data_prep.sample_corpus``: write a sample dump."""

from data_prep.sample_corpus import main

raise SystemExit(main())
