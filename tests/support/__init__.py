"""Helpers that only the tests use, each for tests of more than one module: a test module
imports these, never another test module of another folder. What the bench uses as well is
in plantstore/testing/."""
