"""The documents: canonical JSON (canonical), the frozen verdict documents built with it
(verdict_documents), what a committee must settle in one (findings), and what a signed report
says (report_context)."""
