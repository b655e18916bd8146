"""The standalone live broker metrics page (``/ssbench/`` on the Locust web UI), polling
``/ssbench/metrics`` every second: its table is the "Broker metrics" tab's rows
(:func:`harness.web.metrics.table_rows`), its charts the history. Self-contained: no external
scripts or fonts."""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>ssbench: live broker metrics</title>
<style>
 body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
 h1{font-size:1.3em;margin:0 0 .2em} .sub{color:#666;margin-bottom:1em}
 table{border-collapse:collapse;min-width:32em;background:#fff}
 td{border-bottom:1px solid #ddd;padding:.35em .8em} td.v{text-align:right;font-variant-numeric:tabular-nums}
 .charts{display:flex;gap:1.5em;flex-wrap:wrap;margin-top:1.2em}
 .chart{background:#fff;border:1px solid #ddd;padding:.5em} .chart b{font-size:.9em}
 a{color:#1565c0}
</style></head>
<body>
<h1>Live broker metrics</h1>
<div class="sub" id="sub">loading...</div>
<table id="t"><tbody></tbody></table>
<div class="charts">
 <div class="chart"><b>Messages received/s at the target</b><br><svg id="c1" width="420" height="120"></svg></div>
 <div class="chart"><b>Transmission queue (blue) and target queue (orange) depth</b><br><svg id="c2" width="420" height="120"></svg></div>
</div>
<p><a href="../">Back to the Locust UI</a> &middot; <a href="metrics">JSON</a></p>
<script>
function esc(t){ return String(t).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function fmt(v, d){ if(v===null||v===undefined) return '-'; return Number(v).toLocaleString(undefined,{maximumFractionDigits:d||0}); }
function line(svg, series, colors){
  const w=+svg.getAttribute('width'), h=+svg.getAttribute('height');
  let max=1; series.forEach(s=>s.forEach(v=>{ if(v!==null&&v>max) max=v; }));
  let out='<text x="4" y="12" font-size="10" fill="#666">'+fmt(max)+'</text>';
  series.forEach((s,i)=>{ if(s.length<2) return;
    const pts=s.map((v,j)=>(j*(w-4)/(s.length-1)+2).toFixed(1)+','+(h-2-(v||0)*(h-16)/max).toFixed(1)).join(' ');
    out+='<polyline fill="none" stroke-width="1.5" stroke="'+colors[i]+'" points="'+pts+'"/>'; });
  svg.innerHTML=out;
}
async function tick(){
  try{
    const m=await (await fetch('metrics',{cache:'no-store'})).json();
    document.getElementById('sub').textContent='';
    document.querySelector('#t tbody').innerHTML=m.rows.map(r=>'<tr><td>'+esc(r.metric)+'</td><td class="v">'+esc(r.value)+'</td></tr>').join('');
    const h=m.history||[];
    line(document.getElementById('c1'),[h.map(x=>x.received_per_s)],['#2e7d32']);
    line(document.getElementById('c2'),[h.map(x=>x.xmitq_total),h.map(x=>x.queue_depth)],['#1565c0','#ef6c00']);
  }catch(e){ document.getElementById('sub').textContent='error: '+e; }
}
tick(); setInterval(tick,1000);
</script>
</body></html>
"""
