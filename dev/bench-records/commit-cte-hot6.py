"""Client CPU of one write transaction's three INSERTs and COMMIT sent in one psycopg pipeline, three
ways (issue 25 goal 1, sixth pass): `executemany` of one row each (what `commit_pipelined` does), plain
`execute` each, and one statement (a data-modifying CTE) with the three INSERTs.

Usage, from a checkout with its venv active: `python dev/bench-records/commit-cte-hot6.py`

Scratch tables shaped like the memory, audit-entry and event rows (text, jsonb, bytea) on a fresh
embedded PostgreSQL; 4 rounds of 1,500 commits per way after 50 warm-up ones, the order of the ways
reversed every other round; `time.process_time` (this process: psycopg's side, not PostgreSQL's).
"""
import time, os, json, psycopg
from app.bench import common
from app.db.embedded import start_embedded
N=1500
load0=os.getloadavg()
with common.scratch_dir() as d:
    url=start_embedded(d).admin_url.replace("postgresql+psycopg://","postgresql://")
    with psycopg.connect(url) as c:
        c.execute("create table a(id text primary key, x text, y jsonb, z bytea)"); c.execute("create table b(id text primary key, x text, y jsonb)"); c.execute("create table e(id text primary key, x text)"); c.commit()
        qa="insert into a(id,x,y,z) values (%(id)s,%(x)s,%(y)s,%(z)s)"; qb="insert into b(id,x,y) values (%(id)s,%(x)s,%(y)s)"; qe="insert into e(id,x) values (%(id)s,%(x)s)"
        from psycopg.types.json import Jsonb
        def rows(i,k): return ([{"id":f"{k}a{i}","x":"hello "*10,"y":Jsonb({"k":i}),"z":b"x"*64}],[{"id":f"{k}b{i}","x":"e","y":Jsonb({"a":1})}],[{"id":f"{k}e{i}","x":"ev"}])
        def many(i,k):
            a,b,e=rows(i,k)
            with c.cursor() as cur, c.pipeline():
                cur.executemany(qa,a); cur.executemany(qb,b); cur.executemany(qe,e); cur.execute("COMMIT",prepare=False)
        def one(i,k):
            a,b,e=rows(i,k)
            with c.cursor() as cur, c.pipeline():
                cur.execute(qa,a[0]); cur.execute(qb,b[0]); cur.execute(qe,e[0]); cur.execute("COMMIT",prepare=False)
        qc=("with a1 as (insert into a(id,x,y,z) values (%(aid)s,%(ax)s,%(ay)s,%(az)s)), "
            "b1 as (insert into b(id,x,y) values (%(bid)s,%(bx)s,%(by)s)) insert into e(id,x) values (%(eid)s,%(ex)s)")
        def cte(i,k):
            a,b,e=rows(i,k)
            p={**{"a"+kk:v for kk,v in a[0].items()},**{"b"+kk:v for kk,v in b[0].items()},**{"e"+kk:v for kk,v in e[0].items()}}
            with c.cursor() as cur, c.pipeline():
                cur.execute(qc,p); cur.execute("COMMIT",prepare=False)
        res={"many":[],"one":[],"cte":[]}
        for r in range(4):
            order=[("many",many),("one",one),("cte",cte)]
            for name,f in (order if r%2==0 else order[::-1]):
                for i in range(50): f(i, f"w{name}{r}")
                s=time.process_time()
                for i in range(N): f(i, f"{name}{r}")
                res[name].append(round((time.process_time()-s)*1000/N,4))
        print(json.dumps({"command":"python dev/bench-records/commit-cte-hot6.py","ms_cpu_per_commit":res,"load_before":load0,"load_after":os.getloadavg()}, indent=1))
