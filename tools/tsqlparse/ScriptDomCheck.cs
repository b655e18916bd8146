// Parse T-SQL batches with Microsoft's ScriptDom (Microsoft.SqlServer.TransactSql.ScriptDom.dll)
// under the TSql130, TSql140 and TSql150 grammars (SQL Server 2016, 2017, 2019).
//
// stdin: UTF-8 batches separated by U+001E (record separator).
// stdout: one line per batch and grammar: INDEX <TAB> GRAMMAR <TAB> ok
//                                      or INDEX <TAB> GRAMMAR <TAB> error <TAB> LINE:COLUMN MESSAGE
// The first line names the assembly version: "# ScriptDom VERSION".
// Built and run by tools/tsqlparse/tsqlparse.py (mcs, Mono); see docs/sqlserver.md.
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;
using Microsoft.SqlServer.TransactSql.ScriptDom;

static class ScriptDomCheck
{
    static int Main()
    {
        var input = new StreamReader(Console.OpenStandardInput(), new UTF8Encoding(false)).ReadToEnd();
        var batches = input.Split('\u001e');
        var grammars = new KeyValuePair<string, Func<TSqlParser>>[] {
            new KeyValuePair<string, Func<TSqlParser>>("TSql130", () => new TSql130Parser(true)),
            new KeyValuePair<string, Func<TSqlParser>>("TSql140", () => new TSql140Parser(true)),
            new KeyValuePair<string, Func<TSqlParser>>("TSql150", () => new TSql150Parser(true)),
        };
        var stdout = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false));
        stdout.WriteLine("# ScriptDom " + typeof(TSqlParser).Assembly.GetName().Version);
        for (int i = 0; i < batches.Length; i++)
        {
            if (batches[i].Trim().Length == 0) continue;
            foreach (var g in grammars)
            {
                IList<ParseError> errors;
                g.Value().Parse(new StringReader(batches[i]), out errors);
                if (errors.Count == 0)
                {
                    stdout.WriteLine(i + "\t" + g.Key + "\tok");
                    continue;
                }
                foreach (var e in errors)
                    stdout.WriteLine(i + "\t" + g.Key + "\terror\t" + e.Line + ":" + e.Column + " "
                                     + e.Message.Replace('\n', ' ').Replace('\r', ' ').Replace('\t', ' '));
            }
        }
        stdout.Flush();
        return 0;
    }
}
