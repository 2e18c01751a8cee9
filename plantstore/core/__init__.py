"""The contract's types, at the bottom of the house: every part may use them, they use no part."""
