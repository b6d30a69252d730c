module verdict.example/ingest

go 1.19
