"""Text for people: sizes in bytes, and the audit document as rows of formatted text."""
