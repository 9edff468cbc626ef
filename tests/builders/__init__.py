"""Test data builders shared by several test modules (no tests here)."""
