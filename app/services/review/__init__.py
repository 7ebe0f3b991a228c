"""Review: staged changes and their decisions, confirmations, separation of duties, learned rules and their backtests."""
