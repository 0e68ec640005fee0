"""A person's conversations in and out: the export file (``document``), writing it
(``exporting``), reading it and ChatGPT's export back (``importing``, ``chatgpt``)."""
