"""LCORE's legacy query API (`/v1/query`, `/v1/streaming_query`) as translators around a turn."""
