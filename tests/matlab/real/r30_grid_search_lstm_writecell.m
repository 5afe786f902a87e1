% Pattern: a course repository's exercise on a laser time series: z-scored train and test sets,
% a grid search over hidden units and lag reduced to one run by reassigning the lists, a helper
% from another file that windows the series (getTimeSeriesTrainData), trainNetwork with two
% outputs inside nested loops, closed-loop forecasting with predictAndUpdateState and
% YPred(:, end + 1) = ..., results appended to a CSV with writecell(..., 'WriteMode', 'append'),
% predictions written with writematrix, a plot; `clear` at the top.
% Source: GitHub repository (course exercise "exercise2_LSTM").
% MATLAB: clean: sequenceinput(30)-lstm(30)-fc(1)-regressionoutput (attnlab: 3 layers, the
% regression output becomes the loss); lstm 4*30*(30 + 30) + 4*30 = 7,320, fc 31: 7,351.
% Expect: exit 0 "3 layers" "no issues" learnables=7351
clear
clc
close all

% results file with a header row
resultsFile = 'Data/LSTM_results.csv';
header = {'Hidden', 'Lag', 'Test MSE'};
writecell(header, resultsFile);

trainData = load('Data/lasertrain.dat');
testData = load('Data/laserpred.dat');

% standardise with the training statistics
mu = mean(trainData);
sigma = std(trainData);
trainStd = (trainData - mu) / sigma;
testStd = (testData - mu) / sigma;

% the grid
hiddenList = [5, 10, 20, 30];
lagList = [5, 10, 20, 30];
% a single run
hiddenList = 30;
lagList = 30;
repetitions = 1;

for h = 1:size(hiddenList, 2)
    for g = 1:size(lagList, 2)
        numHiddenUnits = hiddenList(h);
        numFeatures = lagList(g);
        fprintf("Hidden: %d, lag: %d \n", numHiddenUnits, numFeatures);

        [XTrain, YTrain] = getTimeSeriesTrainData(trainStd, numFeatures);

        layers = [ ...
            sequenceInputLayer(numFeatures)
            lstmLayer(numHiddenUnits)
            fullyConnectedLayer(1)
            regressionLayer];

        options = trainingOptions('adam', ...
            'MaxEpochs', 500, ...
            'GradientThreshold', 1, ...
            'InitialLearnRate', 0.005, ...
            'LearnRateSchedule', 'piecewise', ...
            'LearnRateDropPeriod', 100, ...
            'LearnRateDropFactor', 0.5, ...
            'Verbose', 0 ...
            );

        for r = 1:repetitions
            disp("Training...");
            tic;
            [net, tr] = trainNetwork(XTrain, YTrain, layers, options);
            elapsed = toc;
            disp(elapsed);

            % forecast the test span from the last lag values
            net = predictAndUpdateState(net, XTrain);
            YPred = [];
            window = trainStd(end - numFeatures + 1:end);
            for b = 1:numel(testStd)
                [net, nextValue] = predictAndUpdateState(net, window);
                YPred(:, end + 1) = nextValue;
                window = [window(2:end); nextValue];
            end

            testMse = mean(mean((YPred - testStd).^2));
            disp("MSE:");
            disp(testMse);
            row = {numHiddenUnits, numFeatures, testMse};
            writecell(row, resultsFile, 'WriteMode', 'append');
        end
    end
end

disp("Done!");
writematrix(YPred, "LSTM_preds.txt");

figure
plot(testStd)
hold on
plot(YPred)
hold off
legend(["Observed" "Forecast"])
