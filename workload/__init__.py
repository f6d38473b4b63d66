"""The stream generator: a deterministic smart-plug stream at any rate, its out-of-order
arrival, and the counter-based draws both use. The ground floor: every layer may use it."""
