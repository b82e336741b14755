def test_progress_call_over_real_http(client):
    client.initialize()
    request_id, result = client.call_tool("progress", {"count": 3, "delay": 0}, progress_token="p")
    assert result.status == 200
    assert result.events[0].id and result.events[0].data == "" and result.events[0].retry == 1000
    progress = [m for m in result.messages if m.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    assert result.messages[-1] == {"jsonrpc": "2.0", "id": request_id,
                                   "result": {"content": [{"type": "text", "text": "done 3"}]}}
