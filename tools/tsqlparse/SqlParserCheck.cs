// Parse T-SQL batches with Microsoft.SqlServer.SqlParser.dll (the parser behind SQL Server's
// tools' IntelliSense) at compatibility levels 130, 140 and 150.
//
// stdin: UTF-8 batches separated by U+001E (record separator).
// stdout: one line per batch and level: INDEX <TAB> LEVEL <TAB> ok
//                                    or INDEX <TAB> LEVEL <TAB> error <TAB> LINE:COLUMN MESSAGE
// Warnings are not errors. The first line names the assembly version: "# SqlParser VERSION".
// Built and run by tools/tsqlparse/tsqlparse.py (mcs, Mono); see docs/sqlserver.md.
using System;
using System.IO;
using System.Text;
using Microsoft.SqlServer.Management.SqlParser.Common;
using Microsoft.SqlServer.Management.SqlParser.Parser;

static class SqlParserCheck
{
    static int Main()
    {
        var input = new StreamReader(Console.OpenStandardInput(), new UTF8Encoding(false)).ReadToEnd();
        var batches = input.Split('\u001e');
        var levels = new[] {
            Tuple.Create("Version130", DatabaseCompatibilityLevel.Version130, TransactSqlVersion.Version130),
            Tuple.Create("Version140", DatabaseCompatibilityLevel.Version140, TransactSqlVersion.Version140),
            Tuple.Create("Version150", DatabaseCompatibilityLevel.Version150, TransactSqlVersion.Version150),
        };
        var stdout = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false));
        stdout.WriteLine("# SqlParser " + typeof(Parser).Assembly.GetName().Version);
        for (int i = 0; i < batches.Length; i++)
        {
            if (batches[i].Trim().Length == 0) continue;
            foreach (var lv in levels)
            {
                // no batch separator: every input is one batch, as ssbench sends it
                var options = new ParseOptions(string.Empty, true, lv.Item2, lv.Item3);
                var result = Parser.Parse(batches[i], options);
                bool failed = false;
                foreach (var e in result.Errors)
                {
                    if (e.IsWarning) continue;
                    failed = true;
                    stdout.WriteLine(i + "\t" + lv.Item1 + "\terror\t" + e.Start.LineNumber + ":"
                                     + e.Start.ColumnNumber + " "
                                     + e.Message.Replace('\n', ' ').Replace('\r', ' ').Replace('\t', ' '));
                }
                if (!failed) stdout.WriteLine(i + "\t" + lv.Item1 + "\tok");
            }
        }
        stdout.Flush();
        return 0;
    }
}
