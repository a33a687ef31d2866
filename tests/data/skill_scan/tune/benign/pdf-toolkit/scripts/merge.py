"""Merge PDF files given on the command line into merged.pdf."""

import sys

from pypdf import PdfWriter

writer = PdfWriter()
for name in sys.argv[1:]:
    writer.append(name)
writer.write("merged.pdf")
